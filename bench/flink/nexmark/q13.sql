-- The suite's q13 (bounded side input join): its lookup join on the static side input
-- written as a plain join, the same rows for a table that never changes. The side input
-- is the file written with the events (rows i,i for i below 10 000), ${SIDE_INPUT}: a
-- copy of it (Flink's file source skips names that start with _).
CREATE TABLE side_input (
    `key` BIGINT,
    `value` STRING
) WITH (
    'connector' = 'filesystem',
    'path' = 'file://${SIDE_INPUT}',
    'format' = 'csv'
);

SELECT B.auction, B.bidder, B.price, B.date_time, S.`value`
FROM bid B JOIN side_input S ON MOD(B.auction, 10000) = S.`key`
