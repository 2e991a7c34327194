"""The action journal: what the run engine records in, and replays from, the action log.

Three jobs, one module each:

- ``_replay``: ``ActionJournal``, one job's view of the log for one attempt, and the rules
  that decide what an action replays (the run index, completed records, pruning); the
  engine asks it one question per action (``ActionJournal.lookup``, answered by a
  ``Lookup``);
- ``_calls``: call recording (``CallRecorder``, ``CallSlot``, ``CallFuture``): one
  execution's durable calls, numbered, answered from the log while they match, recorded
  when they run;
- ``_writers``: the writer threads, which write durable calls' outcomes (group commits) and
  completed records (batches), and what is written when.

Other modules of the runtime import the names below, never the private modules.
"""

from flink_agents.runtime.journal._calls import CallFuture, CallRecorder, CallSlot
from flink_agents.runtime.journal._replay import ActionJournal, Lookup

__all__ = ["ActionJournal", "CallFuture", "CallRecorder", "CallSlot", "Lookup"]
