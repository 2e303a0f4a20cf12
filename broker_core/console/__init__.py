"""The read-only web console: a WSGI app (``console_app``) over a running broker's state.

Pages are plain HTML, CSS and JavaScript shipped in ``static/`` (no build step); they poll the JSON API
under ``/api/`` that ``api`` answers from a ``ServerView``. Nothing here writes: the app answers GET and
HEAD only.
"""

from .app import ConsoleApp, console_app
from .lag_sampler import LagSample, LagSampler
from .server_view import ServerView

__all__ = ["ConsoleApp", "console_app", "LagSample", "LagSampler", "ServerView"]
