"""Code shared by test modules (imported as ``tests.support.<module>``, wherever the test file lives)."""
