# Sourced by the scripts in this directory (from the repository root): sets PY, the Python
# everything runs with. $PYTHON if set; else the repository's .venv, once bootstrap.sh made
# one (for a Python the system manages, as Debian's is, or one without pip); else python3.
if [ -n "${PYTHON:-}" ]; then
    PY=$PYTHON
elif [ -x .venv/bin/python ]; then
    PY=$PWD/.venv/bin/python
else
    PY=python3
fi
