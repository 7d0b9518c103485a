"""The driver's epoch loop on Spark: plans, tasks, clock, snapshots, status, Spark session."""
