"""The documentation's pictures, taken again from the browser tests (``make screenshots``).

Runs the browser tests that take them, each saving its screenshots at 1366 and 360 px, then copies the chosen
ones into ``docs/img`` under the names the guides use, made smaller (at most 1366 px wide, optimised PNG).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "img"
#: The guides' picture → (the browser test that takes it, the screenshot it saves).
PICTURES = {
    "readme-batch.png": ("tests/browser/test_browser_batch_parties.py", "batch-parties-en-1366.png"),
    "readme-batch.ru.png": ("tests/browser/test_browser_batch_parties.py", "batch-parties-ru-1366.png"),
    "template-parties.png": ("tests/browser/test_browser_template_parties.py", "template-parties-saved-1366.png"),
    "new-batch-order.png": ("tests/browser/test_browser_template_parties.py", "new-batch-order-1366.png"),
    "column-mapping.png": ("tests/browser/test_browser_column_mapping.py", "column-mapping-offered-1366.png"),
    "field-condition.png": ("tests/browser/test_browser_field_conditions.py", "field-condition-editing-1366.png"),
    "signing-phone.png": ("tests/browser/test_browser_signing_fields.py", "signing-fields-360.png"),
    "countersign-list.png": ("tests/browser/test_browser_countersign.py", "countersign-list-1366.png"),
}
#: Full-page shots of long pages are cut here: the guide shows the top of the page.
MAX_HEIGHT = 1400


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        tests = sorted({test for test, _ in PICTURES.values()})
        env = {**os.environ, "TEST_ARTIFACTS": folder}
        ran = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", *tests], cwd=ROOT, env=env, check=False)
        if ran.returncode:
            print("the browser tests failed: no picture was replaced", file=sys.stderr)
            return ran.returncode
        IMAGES.mkdir(parents=True, exist_ok=True)
        for name, (_, shot) in PICTURES.items():
            with Image.open(Path(folder) / shot) as image:
                picture = image.convert("RGB")
                picture = picture.crop((0, 0, picture.width, min(picture.height, MAX_HEIGHT)))
                picture.save(IMAGES / name, optimize=True)
            print(f"docs/img/{name} ← {shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
