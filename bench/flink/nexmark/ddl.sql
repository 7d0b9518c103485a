-- The events of the bench's files instead of the suite's datagen: the crate's JSON lines
-- ({"Bid": {…}}, {"Person": …}, {"Auction": …}), times in ms since the epoch; the suite's
-- event time and watermark (dateTime - 4 s) over every event, and its views bid, person
-- and auction (with the crate's field names). ${EVENTS}: the directory.
-- `dateTime` is quoted: Flink 2's parser reserves the word.
CREATE TABLE events (
    Bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
            date_time BIGINT, extra STRING>,
    Person ROW<id BIGINT, name STRING, email_address STRING, credit_card STRING,
               city STRING, state STRING, date_time BIGINT, extra STRING>,
    Auction ROW<id BIGINT, item_name STRING, description STRING, initial_bid BIGINT,
                reserve BIGINT, date_time BIGINT, expires BIGINT, seller BIGINT,
                category BIGINT, extra STRING>,
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

CREATE VIEW person AS
SELECT Person.id AS id, Person.name AS name, Person.email_address AS email_address,
       Person.credit_card AS credit_card, Person.city AS city, Person.state AS state,
       Person.date_time AS date_time, `dateTime`, Person.extra AS extra
FROM events WHERE Person IS NOT NULL;

CREATE VIEW auction AS
SELECT Auction.id AS id, Auction.item_name AS item_name, Auction.description AS description,
       Auction.initial_bid AS initial_bid, Auction.reserve AS reserve,
       Auction.date_time AS date_time, `dateTime`, Auction.expires AS expires,
       Auction.seller AS seller, Auction.category AS category, Auction.extra AS extra
FROM events WHERE Auction IS NOT NULL;
