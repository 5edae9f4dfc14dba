"""The managed ledger's and the cursor's state machines.

Managed ledger (Pulsar's names, shown in internal stats as ``state``):

* ``None``           -- constructed, initializing (reading metadata, recovering).
* ``LedgerOpened``   -- a write handle is open; adds go straight to it.
* ``ClosingLedger``  -- rolling over: in-flight adds drain, the ledger is closed;
                        new adds queue (in call order) for the next ledger.
* ``CreatingLedger`` -- creating the next ledger and recording it in the list.
* ``WriteFailed``    -- creating a ledger failed; queued adds failed; the next
                        add tries to create one again.
* ``Terminated``     -- no more adds, ever; the last position is fixed (stored).
* ``Fenced``         -- another owner took over (metadata CAS failed or our
                        ledger was fenced by a recovering reader).  Terminal.
* ``Closed``         -- closed by its owner.  Terminal.

Every transition goes through :meth:`check_transition`; a transition not in
:data:`ML_TRANSITIONS` is a bug (``AssertionError``).

Cursor: ``Open`` -> ``Closing`` -> ``Closed``; durable cursors persist while Open.
"""

from __future__ import annotations

import enum


class MLState(enum.Enum):
    NONE = "None"
    LEDGER_OPENED = "LedgerOpened"
    CLOSING_LEDGER = "ClosingLedger"
    CREATING_LEDGER = "CreatingLedger"
    WRITE_FAILED = "WriteFailed"
    TERMINATED = "Terminated"
    FENCED = "Fenced"
    CLOSED = "Closed"


_TERMINAL = {MLState.FENCED, MLState.CLOSED}

ML_TRANSITIONS: dict[MLState, frozenset[MLState]] = {
    MLState.NONE: frozenset({MLState.LEDGER_OPENED, MLState.TERMINATED, MLState.FENCED, MLState.CLOSED}),
    MLState.LEDGER_OPENED: frozenset(
        {MLState.CLOSING_LEDGER, MLState.TERMINATED, MLState.FENCED, MLState.CLOSED}
    ),
    MLState.CLOSING_LEDGER: frozenset(
        {MLState.CREATING_LEDGER, MLState.TERMINATED, MLState.FENCED, MLState.CLOSED}
    ),
    MLState.CREATING_LEDGER: frozenset(
        {MLState.LEDGER_OPENED, MLState.WRITE_FAILED, MLState.FENCED, MLState.CLOSED}
    ),
    MLState.WRITE_FAILED: frozenset(
        {MLState.CREATING_LEDGER, MLState.TERMINATED, MLState.FENCED, MLState.CLOSED}
    ),
    MLState.TERMINATED: frozenset({MLState.FENCED, MLState.CLOSED}),
    MLState.FENCED: frozenset({MLState.CLOSED}),
    MLState.CLOSED: frozenset(),
}


def check_transition(old: MLState, new: MLState) -> None:
    if new is old:
        return
    if new not in ML_TRANSITIONS[old]:
        raise AssertionError(f"managed ledger: illegal transition {old.value} -> {new.value}")


def is_terminal(state: MLState) -> bool:
    return state in _TERMINAL


class CursorState(enum.Enum):
    OPEN = "Open"
    CLOSING = "Closing"
    CLOSED = "Closed"
