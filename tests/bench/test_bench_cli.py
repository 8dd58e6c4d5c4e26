"""`tflite-train bench` refuses bad input in one line, before any work."""


def test_render_only_without_a_run_fails_cleanly(tmp_path, capsys):
    from tflite_train.cli import main

    assert main(["bench", "--out", str(tmp_path), "--render-only"]) == 2
    assert "holds no benchmark run" in capsys.readouterr().err


def test_cli_refuses_missing_lite0_weights_before_any_work(tmp_path, capsys):
    from tflite_train.cli import main

    out = tmp_path / "out"
    assert main(["bench", "--quick", "--lite0-weights", str(tmp_path / "nope.weights.h5"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nope.weights.h5" in err and "not found" in err and "Traceback" not in err
    assert not out.exists()
