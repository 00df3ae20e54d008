"""The application: the operation table and the one object that runs it, between the library and its faces."""
