-- The suite's q7 (highest bid): the bids at the highest price of each 10 s window.
SELECT B.auction, B.bidder, B.price, B.date_time, B.extra
FROM bid B
JOIN (
    SELECT max(price) AS maxprice, window_end AS `dateTime`
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.`dateTime` BETWEEN B1.`dateTime` - INTERVAL '10' SECOND AND B1.`dateTime`
