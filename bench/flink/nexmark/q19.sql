-- The suite's q19 (the ten highest bids of each auction), with the oracle's tie-break.
SELECT auction, bidder, price, channel, url, date_time, extra, rank_number FROM (
    SELECT *, ROW_NUMBER() OVER (
        PARTITION BY auction
        ORDER BY price DESC, `dateTime`, bidder, channel, url, extra) AS rank_number
    FROM bid)
WHERE rank_number <= 10
