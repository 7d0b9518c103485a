"""Nexmark on sparkpoint: the queries of Flink's Nexmark suite, over bids and the joins
of persons, auctions and bids, written with the pipeline API, over event files of the
``nexmark`` crate's generator.

``python -m sparkpoint.examples.nexmark q5 --events N`` runs one (``--help`` lists them);
docs/nexmark.md says what each computes, which are left out and why. Modules:

- events.py: the event files as streams of persons, auctions and bids, event time and
  the suite's watermark;
- stateless.py (q0, q1, q2, q10, q14, q21, q22), hot_items.py (q5), highest_bid.py (q7),
  sessions.py (q11), daily.py (q15, q16, q17), ranking.py (q18, q19): the queries of bids;
- regular_join.py (q3, q20), winning_bids.py (q4, q6, q9), new_users.py (q8): the joins;
- queries.py: the queries by name; run.py: one run on Spark;
- oracle.py: each query in DuckDB SQL, and the check of a run's committed output.
"""
