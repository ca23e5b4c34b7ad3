"""Write repogym's tasks as verl parquet rows (train/test), for examples/verl/run_grpo.sh.

python examples/verl/make_dataset.py --out data/repogym
"""

from __future__ import annotations

import argparse
from pathlib import Path

import datasets

from repogym.integrations.verl import verl_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="data/repogym")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        rows = verl_rows(split)
        if not rows:
            raise SystemExit(f"no tasks in split {split!r}. Fix: check `repogym list`")
        datasets.Dataset.from_list(rows).to_parquet(str(out / f"{split}.parquet"))
        print(f"{split}: {len(rows)} rows -> {out / f'{split}.parquet'}")


if __name__ == "__main__":
    main()
