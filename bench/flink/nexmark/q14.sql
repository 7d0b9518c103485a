-- The suite's q14 (calculation): its count_char UDF written as a length difference.
SELECT auction, bidder, CAST(CAST(0.908 * price AS DECIMAL(23, 3)) AS STRING) AS price,
       CASE WHEN HOUR(`dateTime`) >= 8 AND HOUR(`dateTime`) <= 18 THEN 'dayTime'
            WHEN HOUR(`dateTime`) <= 6 OR HOUR(`dateTime`) >= 20 THEN 'nightTime'
            ELSE 'otherTime' END AS bidTimeType,
       date_time, extra, CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
