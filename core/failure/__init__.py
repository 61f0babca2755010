"""What went wrong and what to do about it: the failure taxonomy, the rule table that
classifies an exception, the failure record and the retry decision. Imports ``model`` and
``base``.
"""
