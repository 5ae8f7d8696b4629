"""Issue 17 (coordinator, stop 47, judge61: written while batch 51 was collected, without reading it; in sample on
batch 50). Lightning's EarlyStopping notes show training ran; a file the program is deleting is not a missing input.
Records: real lines with their source (oos-batch50)."""

from __future__ import annotations

from analysis.logs.classify import classify

# a Lightning GAT run (oos-batch50): the model summary, then only EarlyStopping's notes
_EARLY_STOPPING = ("LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]\n\n  | Name | Type | Params\n"
                   "Metric val_loss improved. New best score: 0.093\n"
                   "Metric val_loss improved by 0.041 >= min_delta = 0.0. New best score: 0.052\n"
                   "Metric val_loss improved by 0.012 >= min_delta = 0.0. New best score: 0.040\n")
# FunASR's DeepSpeed trainer (oos-batch50): its checkpoint clean-up removes a folder another process removed first
_RMTREE = ('  File "/workspace/FunASR/funasr/utils/misc.py", line 118, in smart_remove\n    shutil.rmtree(path)\n'
           '  File "/usr/lib/python3.10/shutil.py", line 729, in rmtree\n    os.rmdir(path)\n'
           "FileNotFoundError: [Errno 2] No such file or directory: './train_outputs_full2/model.pt.ep0.5000'\n")
_OPEN = ('  File "/workspace/train.py", line 40, in load\n    with open(args.data_path) as f:\n'
         "FileNotFoundError: [Errno 2] No such file or directory: '/data/train.jsonl'\n")


def test_early_stopping_notes_are_progress():
    failure = classify(_EARLY_STOPPING)
    assert failure.kind == "ok" and "training steps ran" in failure.reason


def test_prose_about_a_best_score_is_not_progress():
    assert classify("loading data\nthe new best score: 0.3 came from the baseline\n").kind == "unknown"


def test_a_file_the_program_deletes_is_not_a_missing_input():
    assert classify("step 100 loss 2.3\nTraceback (most recent call last):\n" + _RMTREE).kind == "crashed"


def test_a_file_the_program_opens_is_still_a_missing_input():
    assert classify("Traceback (most recent call last):\n" + _OPEN).kind == "config_error"
