"""Progress of Spark jobs for the export command: a rich bar on a terminal, plain lines otherwise.

A daemon thread polls SparkContext.statusTracker() (the same numbers the Spark UI shows)
every `interval` seconds and reports finished / total tasks of the running stages under
the current phase name. Plain mode prints a line only when the numbers change, at most
once per `interval`, so logs stay short.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Self, TextIO


class Progress:
    def __init__(
        self, tracker: Any, stream: TextIO = sys.stdout, interval: float = 1.0, rich: bool | None = None
    ) -> None:
        self._tracker = tracker
        self._stream = stream
        self._interval = interval
        self._phase = "starting"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: tuple[str, int, int] | None = None
        use_rich = stream.isatty() if rich is None else rich
        self._rich: Any = None
        if use_rich:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=None if stream is sys.stdout else _console(stream), transient=False,
            )  # fmt: skip
            self._task = self._rich.add_task("starting", total=None)

    def phase(self, name: str) -> None:
        """Name what Spark is doing now ("export", "merge"); shown with the task counts."""
        self._phase = name
        if self._rich is None:
            self.line(f"{name} ...")

    def line(self, text: str) -> None:
        if self._rich is not None:
            self._rich.console.print(text)
        else:
            print(text, file=self._stream, flush=True)

    def __enter__(self) -> Self:
        if self._rich is not None:
            self._rich.start()
        self._thread = threading.Thread(target=self._run, name="rmq-export-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._rich is not None:
            self._rich.stop()

    def _counts(self) -> tuple[int, int]:
        done = total = 0
        for stage_id in self._tracker.getActiveStageIds():
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return done, total

    def _run(self) -> None:
        last_print = 0.0
        while not self._stop.wait(self._interval):
            try:
                done, total = self._counts()
            except Exception:  # noqa: BLE001 - the context is shutting down; nothing more to show
                return
            if self._rich is not None:
                self._rich.update(self._task, description=self._phase, completed=done, total=total or None)
                continue
            state = (self._phase, done, total)
            now = time.monotonic()
            if total and state != self._last and now - last_print >= self._interval:
                self._last, last_print = state, now
                print(f"{self._phase}: {done}/{total} tasks", file=self._stream, flush=True)


def _console(stream: TextIO) -> Any:
    from rich.console import Console

    return Console(file=stream)
