"""Listener registration shared by the metadata store implementations.

Theory of operation: a store keeps two lists, ``_listeners`` (change
notifications) and ``_session_listeners`` (session events), created in its own
``__init__`` and read by its own delivery code.  :class:`ListenerRegistry`
supplies the four ``MetadataStore`` methods that add to and remove from them;
removing a listener that is not registered is a no-op.
"""

from __future__ import annotations

from magnetar.metadata.api import NotificationListener, SessionListener


class ListenerRegistry:
    """Mixin: ``add_/remove_listener`` and ``add_/remove_session_listener`` over the two lists."""

    _listeners: list[NotificationListener]
    _session_listeners: list[SessionListener]

    def add_listener(self, listener: NotificationListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: NotificationListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def add_session_listener(self, listener: SessionListener) -> None:
        self._session_listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        if listener in self._session_listeners:
            self._session_listeners.remove(listener)
