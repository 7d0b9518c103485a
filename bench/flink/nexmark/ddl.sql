-- The events of the bench's files instead of the suite's datagen: the crate's JSON lines
-- ({"Bid": {…}}, {"Person": …}, {"Auction": …}), times in ms since the epoch; the suite's
-- event time and watermark (dateTime - 4 s) over the bids. ${EVENTS}: the directory.
-- `dateTime` is quoted: Flink 2's parser reserves the word.
CREATE TABLE events (
    Bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
            date_time BIGINT, extra STRING>,
    Person ROW<date_time BIGINT>,
    Auction ROW<date_time BIGINT>,
    -- the time of every event, as the suite's CASE over its event types
    `dateTime` AS CAST(TO_TIMESTAMP_LTZ(
        COALESCE(Bid.date_time, Person.date_time, Auction.date_time), 3) AS TIMESTAMP(3)),
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = 'file://${EVENTS}',
    'format' = 'json',
    'json.fail-on-missing-field' = 'false'
);

CREATE VIEW bid AS
SELECT Bid.auction AS auction, Bid.bidder AS bidder, Bid.price AS price,
       Bid.channel AS channel, Bid.url AS url, Bid.date_time AS date_time,
       `dateTime`, Bid.extra AS extra
FROM events WHERE Bid IS NOT NULL;
