-- The suite's q2 (selection).
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
