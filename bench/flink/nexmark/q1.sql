-- The suite's q1 (currency conversion): 0.908 * price, exact to 3 decimals, as a string.
SELECT auction, bidder, CAST(CAST(0.908 * price AS DECIMAL(23, 3)) AS STRING) AS price,
       date_time, extra
FROM bid
