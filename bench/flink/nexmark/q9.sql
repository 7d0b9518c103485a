-- The suite's q9 (winning bids): each auction with its highest bid within its lifetime,
-- the earliest of equal ones, then the oracle's tie-break (the rest of the bid).
SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller,
       category, extra, auction, bidder, price, bid_date_time, bid_extra
FROM (
    SELECT A.id, A.item_name, A.description, A.initial_bid, A.reserve, A.date_time,
           A.expires, A.seller, A.category, A.extra, B.auction, B.bidder, B.price,
           B.date_time AS bid_date_time, B.extra AS bid_extra,
           ROW_NUMBER() OVER (
               PARTITION BY A.id
               ORDER BY B.price DESC, B.date_time, B.bidder, B.channel, B.url, B.extra
           ) AS rownum
    FROM auction AS A
    JOIN bid AS B ON A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
)
WHERE rownum <= 1
