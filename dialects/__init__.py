"""The µGraph dialects: ``kernel``, ``block`` and ``thread``, one module each."""
