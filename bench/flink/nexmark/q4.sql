-- The suite's q4 (average price for a category): each auction's highest bid within its
-- lifetime, then their average per category (an updating result). The lifetime is
-- compared in ms (date_time, expires), as the oracle does.
SELECT Q.category, AVG(Q.final) AS final
FROM (
    SELECT A.id, A.category, MAX(B.price) AS final
    FROM auction AS A
    JOIN bid AS B ON A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) AS Q
GROUP BY Q.category
