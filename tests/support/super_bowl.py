"""The passage the citation check's tests read: Super Bowl 50's, as the SQuAD sample has it."""

from __future__ import annotations

BLOCK = (
    "Super Bowl 50 was an American football game. The game was played on February 7, 2016, at Levi's "
    "Stadium in the San Francisco Bay Area at Santa Clara, California. The Denver Broncos defeated the "
    "Carolina Panthers 24-10 to earn their third Super Bowl title."
)
PLAYED = (
    "The game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area at "
    "Santa Clara, California."
)
QUESTION = "Where did Super Bowl 50 take place?"
TITLE = "The Denver Broncos defeated the Carolina Panthers 24-10 to earn their third Super Bowl title."
