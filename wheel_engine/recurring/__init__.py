"""Recurring timers: the rules that say when a recurrence's occurrences are due.

:mod:`~wheel_engine.recurring.cron` evaluates five-field cron expressions in an IANA time zone
with one daylight saving rule; :mod:`~wheel_engine.recurring.rule` holds the ``every=`` rule,
the checks of a ``schedule_recurring`` call, the occurrences' keys and the catch-up after
downtime. Both are pure: no engine, no I/O, no clock of their own.
"""
