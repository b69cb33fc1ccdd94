"""examples/spark_pipeline.py end to end (smaller), in the session's Spark."""

from __future__ import annotations

import importlib.util

from tests.integration.support import REPO_ROOT


def test_spark_pipeline_example(spark, tmp_path, capsys):
    path = REPO_ROOT / "examples" / "spark_pipeline.py"
    spec = importlib.util.spec_from_file_location("spark_pipeline", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rc = example.main(["--records", "3000", "--max-offsets-per-trigger", "1000", "--work-dir",
                       str(tmp_path / "work")], spark=spark)
    out = capsys.readouterr().out
    assert rc == 0, out[-4000:]
    assert "each committed order exactly once, totals match" in out
    assert "zombie fenced as expected" in out
    assert "result: OK" in out
