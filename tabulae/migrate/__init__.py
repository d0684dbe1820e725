"""Moving another emulator's workspace into Tabulae (``tabulae migrate azurite``)."""
