"""answerbox's processor types, one package each; ``text`` holds what they share.

Importing this package imports none of them: ``answerbox.processors.registry`` lists them."""
