"""What the released-model tests share: no test reaches a network."""

import socket

import pytest


@pytest.fixture
def forbid_network(monkeypatch):
    """forbid_network() makes every later socket connection fail, and returns the attempts made."""
    attempts = []

    def refuse(self, address):
        attempts.append(address)
        raise OSError(f"the test forbids connecting to {address}")

    def arm():
        monkeypatch.setattr(socket.socket, "connect", refuse)
        return attempts

    return arm
