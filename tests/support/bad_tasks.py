"""A small bfcl-format task set with one of every kind of bad input, plus good tasks."""

from tests.conftest import TWITTER_CFG, make_task_file


def _task(task_id, classes, config=None):
    return {
        "id": task_id,
        "question": [[{"role": "user", "content": "..."}]],
        "initial_config": config or {},
        "involved_classes": classes,
        "excluded_function": [],
    }


def bad_task_file(tmp_path):
    tasks = [
        _task("good_tweets", ["TwitterAPI"], TWITTER_CFG),
        "{this line is not json",
        _task("unknown_tool", ["TwitterAPI"], TWITTER_CFG),
        _task("syntax_error", ["TwitterAPI"], TWITTER_CFG),
        _task("load_raises", ["TwitterAPI"], {"TwitterAPI": {**TWITTER_CFG["TwitterAPI"], "tweets": {"abc": {}}}}),
        _task("hangs", ["MathAPI", "TwitterAPI"], TWITTER_CFG),
        _task("good_math", ["MathAPI"]),
    ]
    answers = [
        {
            "id": "good_tweets",
            "ground_truth": [["post_tweet(content='hello', tags=['#a'])"], ["post_tweet(content='again')"]],
        },
        {"id": "unknown_tool", "ground_truth": [["post_tweet(content='x')", "rm_rf(path='/')"]]},
        {"id": "syntax_error", "ground_truth": [["post_tweet(content='x'"]]},
        {"id": "load_raises", "ground_truth": [["post_tweet(content='x')"]]},
        {
            "id": "hangs",
            "ground_truth": [
                [
                    "post_tweet(content='before')",
                    "square_root(number=2, precision=100000000)",
                    "post_tweet(content='after')",
                ]
            ],
        },
        {"id": "good_math", "ground_truth": [["add(a=1, b=2)", "mean(numbers=[1, 2, 3])"]]},
    ]
    return make_task_file(tmp_path, tasks, answers)
