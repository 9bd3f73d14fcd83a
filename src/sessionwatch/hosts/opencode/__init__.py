"""OpenCode's room: its shared SQLite database read as a catalog (``database.py``, ``reader.py``), the
plugin it loads (``plugin.js``, package data) and what that plugin records (``sources.py``), and the files
``sessionwatch install opencode`` writes (``install.py``). See docs/hosts-opencode.md.
"""
