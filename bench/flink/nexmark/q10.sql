-- The suite's q10 (log to a file system): every bid with its day and minute, which the
-- suite's sink partitions by; here they are columns.
SELECT auction, bidder, price, date_time, extra,
       DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') AS dt, DATE_FORMAT(`dateTime`, 'HH:mm') AS hm
FROM bid
