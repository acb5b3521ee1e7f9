"""`omectl rollout history`'s view: the runs (RUN, STARTED, TOOK, LAST, targets) and each run's
story as a table (TIME, KIND, WHAT, WHO), from `rollout_story`'s rows (no I/O)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from models.duration import format_duration
from workers.omectl.rollout_story import RunStory
from workers.omectl.rollout_tree import phase_style


def took(story: RunStory, now: datetime) -> str:
    if story.started is None:
        return "-"
    return format_duration(round(((story.ended or now) - story.started).total_seconds()))


def runs_table(stories: list[RunStory], now: datetime) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("RUN", "STARTED", "TOOK", "LAST", "CHANGE"):
        table.add_column(column, overflow="fold")
    for story in stories:
        started = f"{story.started:%Y-%m-%d %H:%M:%S}" if story.started else "-"
        table.add_row(
            str(story.run), started, took(story, now), Text(story.last, style=phase_style(story.last)), story.opened
        )
    return table


def story_table(story: RunStory) -> Table:
    table = Table(title=f"run {story.run}  {story.workflow_id}  LAST {story.last}", title_justify="left",
                  box=None, pad_edge=False, header_style="bold")
    for column in ("TIME", "KIND", "WHAT", "WHO"):
        table.add_column(column, overflow="fold")
    for row in story.rows:
        table.add_row(f"{row.time:%H:%M:%S}", row.kind, row.text, row.who)
    return table


def history_view(stories: list[RunStory], now: datetime) -> Group:
    return Group(runs_table(stories, now), *(story_table(story) for story in stories))


def history_json(stories: list[RunStory]) -> list[dict[str, Any]]:
    return [
        {
            "run": story.run,
            "workflowId": story.workflow_id,
            "started": story.started.isoformat() if story.started else None,
            "ended": story.ended.isoformat() if story.ended else None,
            "last": story.last,
            "rows": [
                {"time": row.time.isoformat(), "kind": row.kind, "what": row.text, "who": row.who}
                for row in story.rows
            ],
        }
        for story in stories
    ]
