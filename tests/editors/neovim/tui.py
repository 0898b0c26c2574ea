"""A program's real terminal UI, run in a pseudo-terminal and read by a terminal emulator (pyte),
then drawn to a PNG with Pillow and a monospace font: screenshots of Neovim without a display.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pyte
from PIL import Image, ImageDraw, ImageFont

__all__ = ["Terminal", "render_png"]

# Named ANSI colours (xterm's defaults) and the default foreground/background of the picture.
_NAMED = {
    "black": "000000",
    "red": "cd0000",
    "green": "00cd00",
    "brown": "cdcd00",
    "yellow": "cdcd00",
    "blue": "0000ee",
    "magenta": "cd00cd",
    "cyan": "00cdcd",
    "white": "e5e5e5",
    "brightblack": "7f7f7f",
    "brightred": "ff0000",
    "brightgreen": "00ff00",
    "brightbrown": "ffff00",
    "brightyellow": "ffff00",
    "brightblue": "5c5cff",
    "brightmagenta": "ff00ff",
    "brightcyan": "00ffff",
    "brightwhite": "ffffff",
}
_FG, _BG = "e0e2ea", "14161b"  # Neovim's default dark colour scheme (NvimLightGrey2 on NvimDarkGrey2)
_FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu", "/usr/share/fonts/TTF")


class Terminal:
    """``argv`` running in a ``columns`` x ``lines`` pseudo-terminal; :attr:`screen` is what it shows."""

    def __init__(self, argv: Sequence[str], *, columns: int, lines: int, env: dict[str, str], cwd: Path):
        self.screen = pyte.Screen(columns, lines)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self._master = master
        self.proc = subprocess.Popen(
            list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
        )
        os.close(slave)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._stream.feed(data)

    def send(self, keys: str | bytes) -> None:
        os.write(self._master, keys.encode() if isinstance(keys, str) else keys)

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            time.sleep(0.1)
        return predicate()

    def settle(self, quiet: float = 0.5, timeout: float = 10.0) -> None:
        """Wait until the screen stops changing for ``quiet`` seconds."""
        end = time.monotonic() + timeout
        last = self.text()
        stable_since = time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.1)
            now = self.text()
            if now != last:
                last, stable_since = now, time.monotonic()
            elif time.monotonic() - stable_since >= quiet:
                return

    def text(self) -> list[str]:
        with self._lock:
            return list(self.screen.display)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self._master)


def _colour(name: str, default: str) -> tuple[int, int, int]:
    value = default if name == "default" else _NAMED.get(name, name)
    if len(value) != 6:
        value = default
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def _fonts(size: int) -> dict[tuple[bool, bool], ImageFont.FreeTypeFont | ImageFont.ImageFont]:
    names = {
        (False, False): "DejaVuSansMono.ttf",
        (True, False): "DejaVuSansMono-Bold.ttf",
        (False, True): "DejaVuSansMono-Oblique.ttf",
        (True, True): "DejaVuSansMono-BoldOblique.ttf",
    }
    out: dict[tuple[bool, bool], ImageFont.FreeTypeFont | ImageFont.ImageFont] = {}
    for key, name in names.items():
        path = next((Path(d) / name for d in _FONT_DIRS if (Path(d) / name).exists()), None)
        out[key] = ImageFont.truetype(str(path), size) if path else ImageFont.load_default(size)
    return out


def render_png(screen: pyte.Screen, path: Path, *, font_size: int = 16, padding: int = 12) -> None:
    """Draw ``screen`` (colours, bold, italic, underline, the cursor) into a PNG at ``path``."""
    fonts = _fonts(font_size)
    regular = fonts[(False, False)]
    cell_w = round(regular.getlength("M"))
    cell_h = round(font_size * 1.35)
    width, height = screen.columns * cell_w + 2 * padding, screen.lines * cell_h + 2 * padding
    image = Image.new("RGB", (width, height), _colour("default", _BG))
    draw = ImageDraw.Draw(image)
    for y in range(screen.lines):
        row = screen.buffer[y]
        for x in range(screen.columns):
            char = row[x]
            fg, bg = _colour(char.fg, _FG), _colour(char.bg, _BG)
            if char.reverse:
                fg, bg = bg, fg
            left, top = padding + x * cell_w, padding + y * cell_h
            draw.rectangle([left, top, left + cell_w, top + cell_h], fill=bg)
            if char.data.strip():
                font = fonts[(bool(char.bold), bool(char.italics))]
                draw.text((left, top + (cell_h - font_size) // 2 - 1), char.data, font=font, fill=fg)
            if char.underscore:
                draw.line([left, top + cell_h - 2, left + cell_w, top + cell_h - 2], fill=fg)
    if not screen.cursor.hidden:
        left, top = padding + screen.cursor.x * cell_w, padding + screen.cursor.y * cell_h
        draw.rectangle([left, top + 1, left + 1, top + cell_h - 2], fill=_colour("default", _FG))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
