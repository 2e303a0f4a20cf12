"""Kafka's hierarchical timing wheel (``org.apache.kafka.server.util.timer``).

``SystemTimer`` is the entry point: add ``TimerTask``s, call ``advance_clock``
from a reaper thread (or from a test with a ``MockTime``). The other classes
are its parts, exported for inspection and tests.
"""

from .atomic import AtomicInteger
from .delay_queue import DelayQueue
from .executors import InlineExecutor
from .system_timer import DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE, SystemTimer
from .timer import Timer
from .timer_task import CallbackTimerTask, TimerTask
from .timer_task_entry import TimerTaskEntry
from .timer_task_list import NO_EXPIRATION, TimerTaskList
from .timing_wheel import TimingWheel

__all__ = [
    "AtomicInteger",
    "CallbackTimerTask",
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "DelayQueue",
    "InlineExecutor",
    "NO_EXPIRATION",
    "SystemTimer",
    "Timer",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
]
