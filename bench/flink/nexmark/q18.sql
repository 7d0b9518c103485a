-- The suite's q18 (last bid of each bidder on each auction), its ORDER BY dateTime DESC
-- with the oracle's tie-break (the rest of the bid), so the result does not depend on
-- arrival order.
SELECT auction, bidder, price, channel, url, date_time, extra FROM (
    SELECT *, ROW_NUMBER() OVER (
        PARTITION BY bidder, auction
        ORDER BY `dateTime` DESC, price DESC, channel DESC, url DESC, extra DESC) AS rank_number
    FROM bid)
WHERE rank_number <= 1
