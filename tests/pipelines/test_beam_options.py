"""Arguments meant for Beam are checked against Beam's own pipeline options before a job starts."""

import pytest

from tapas_tf.pipelines import beam_options

OUR_FLAGS = ["--max_seq_length", "--output_dir", "--vocab_file"]


@pytest.mark.parametrize("args", [
    [],
    ["--runner=DirectRunner", "--direct_num_workers=2"],
    ["--direct_num_workers", "2", "--direct_running_mode=multi_processing"],
    ["--project=p", "--region=europe-west1", "--temp_location=gs://b/tmp", "--save_main_session"],
])
def test_beam_options_pass(args):
    beam_options.check_pipeline_args(args, OUR_FLAGS)


def test_our_mistyped_flag_names_ours():
    expected = r"^unknown flag --max_seq_lenght=128; did you mean --max_seq_length\?$"
    with pytest.raises(beam_options.UnknownPipelineArgError, match=expected) as raised:
        beam_options.check_pipeline_args(["--runner=DirectRunner", "--max_seq_lenght=128"], OUR_FLAGS)
    assert (raised.value.argument, raised.value.suggestion) == ("--max_seq_lenght=128", "--max_seq_length")


def test_mistyped_beam_option_names_beams():
    with pytest.raises(beam_options.UnknownPipelineArgError, match=r"did you mean --direct_num_workers\?"):
        beam_options.check_pipeline_args(["--direct_num_worker", "2"], OUR_FLAGS)


def test_no_abbreviations_and_no_help():
    # argparse would take --direct_num as --direct_num_workers, and -h would print help and exit.
    with pytest.raises(beam_options.UnknownPipelineArgError, match="unknown flag --direct_num=2"):
        beam_options.check_pipeline_args(["--direct_num=2"])
    with pytest.raises(beam_options.UnknownPipelineArgError, match="unknown flag -h"):
        beam_options.check_pipeline_args(["-h"])


def test_stray_argument_and_far_off_flag_have_no_suggestion():
    with pytest.raises(beam_options.UnknownPipelineArgError, match=r"^unknown argument stray$"):
        beam_options.check_pipeline_args(["stray"], OUR_FLAGS)
    with pytest.raises(beam_options.UnknownPipelineArgError, match=r"^unknown flag --zzzzzzzz$") as raised:
        beam_options.check_pipeline_args(["--zzzzzzzz"], OUR_FLAGS)
    assert raised.value.suggestion is None


def test_bad_value_is_an_error_not_an_exit():
    with pytest.raises(beam_options.PipelineArgsError, match="--direct_num_workers: invalid int value"):
        beam_options.check_pipeline_args(["--direct_num_workers=two"])


def test_known_flags_include_the_runners_options():
    flags = beam_options.known_beam_flags()
    assert {"--runner", "--direct_num_workers", "--project", "--temp_location"} <= set(flags)
    assert beam_options.nearest_flag("--runer=X", flags) == "--runner"
