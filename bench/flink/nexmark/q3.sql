-- The suite's q3 (local item suggestion): the sellers in three states and their auctions
-- of category 10, a regular join. The crate writes states in lower case.
SELECT P.name, P.city, P.state, A.id
FROM auction AS A
JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND P.state IN ('or', 'id', 'ca')
