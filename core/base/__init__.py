"""The foundation every layer may use: the error tree, the status vocabularies, durations,
temporary directories and entry-point discovery. Imports nothing else of interlock.
"""
