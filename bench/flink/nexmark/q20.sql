-- The suite's q20 (expanded bids): every bid on an auction of category 10, with the
-- auction's columns, a regular join.
SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_date_time,
       B.extra AS bid_extra, A.item_name, A.description, A.initial_bid, A.reserve,
       A.date_time AS auction_date_time, A.expires, A.seller, A.category,
       A.extra AS auction_extra
FROM bid AS B
JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10
