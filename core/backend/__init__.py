"""The backend seam: the Backend/Compiler/Runner protocols, capabilities and options, the
lowered plan every backend renders, and ``il.run``/``il.compile`` on top of them.
"""
