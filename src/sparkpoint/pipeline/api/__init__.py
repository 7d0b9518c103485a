"""What an author writes against: functions, state, TTL, timers, event time, windows, builder."""
