"""Where parasweep's shipped files live, whether it runs from a checkout or from an installed wheel."""

from __future__ import annotations

from pathlib import Path


def conf_dir() -> Path:
    """The Hydra config tree (model/, cluster/, ...).

    A wheel ships `conf/` as the package `launcher.conf` (pyproject's package-dir mapping), so that is tried first;
    in a checkout (or an editable install) `launcher.conf` does not exist and `conf/` sits next to `launcher/`.
    """
    from importlib import resources

    try:
        packaged = resources.files("launcher.conf")
    except ModuleNotFoundError:  # checkout or editable install: no launcher.conf package
        packaged = None
    if packaged is not None and packaged.is_dir() and packaged.joinpath("cluster").is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "conf"
