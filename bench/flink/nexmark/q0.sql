-- The suite's q0 (pass-through), date_time kept in ms as the oracle has it.
SELECT auction, bidder, price, date_time, extra FROM bid
