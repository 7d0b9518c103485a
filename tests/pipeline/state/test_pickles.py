"""Pickles written before the pipeline's modules moved into sub-packages still load."""

import pickle

import pytest

from sparkpoint.examples.clicks import _UserState
from sparkpoint.pipeline.api.ttl import TtlValue
from sparkpoint.pipeline.api.windows import TimeWindow
from sparkpoint.pipeline.sinks.files import PendingFile
from sparkpoint.pipeline.sinks.kafka import StagedChunk
from sparkpoint.pipeline.sinks.postgres import PreparedTransaction
from sparkpoint.pipeline.state.pickles import current_location, dumps, loads

#: ``pickle.dumps(..., protocol=5)`` of state values under the flat module paths
#: (``sparkpoint.pipeline.state_ttl``, ``.windows``, ``.sink``, ``.kafka_sink``,
#: ``.postgres``, ``sparkpoint.pipeline.examples.clicks``), made by the code before the move.
OLD_PICKLE = bytes.fromhex(
    "800595e6010000000000007d94288c0677696e646f77948c1d737061726b706f696e742e706970656c696e65"
    "2e73746174655f74746c948c0854746c56616c75659493942981945d94287d948c1b737061726b706f696e74"
    "2e706970656c696e652e77696e646f7773948c0a54696d6557696e646f779493942981945d94284b004b0a65"
    "624b03734b054d60ea65628c076578616d706c65948c23737061726b706f696e742e706970656c696e652e65"
    "78616d706c65732e636c69636b73948c0a5f5573657253746174659493942981947d94288c06636c69636b73"
    "944b028c06616d6f756e74944b008c057061676573947d948c06726563656e74945d948c0773657373696f6e"
    "944e75628c0466696c65948c18737061726b706f696e742e706970656c696e652e73696e6b948c0b50656e64"
    "696e6746696c659493942981945d94284b074b018c02696e948c036f75749465628c056b61666b61948c1e73"
    "7061726b706f696e742e706970656c696e652e6b61666b615f73696e6b948c0b5374616765644368756e6b94"
    "93942981945d94284b074b002965628c08706f737467726573948c1c737061726b706f696e742e706970656c"
    "696e652e706f737467726573948c1350726570617265645472616e73616374696f6e9493942981945d94288c"
    "056769642d37944b026562752e"
)


def test_state_pickled_under_the_old_module_paths_loads() -> None:
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(OLD_PICKLE)  # what restoring an old checkpoint would meet
    assert loads(OLD_PICKLE) == {
        "window": TtlValue({TimeWindow(0, 10): 3}, 5, 60000),
        "example": _UserState(clicks=2),
        "file": PendingFile(7, 1, "in", "out"),
        "kafka": StagedChunk(7, 0, ()),
        "postgres": PreparedTransaction("gid-7", 2),
    }


def test_new_pickles_and_plain_values_round_trip() -> None:
    value = {"window": TtlValue([1, 2], 5, 60000), "n": 3}
    assert loads(dumps(value)) == value
    assert loads(dumps(7)) == 7


def test_a_split_module_finds_each_name_in_its_part() -> None:
    assert current_location("sparkpoint.pipeline.sink", "Sink") == (
        "sparkpoint.pipeline.sinks.base",
        "Sink",
    )
    assert current_location("sparkpoint.pipeline.tasks", "ReadTask") == (
        "sparkpoint.pipeline.runtime.tasks",
        "ReadTask",
    )
    assert current_location("builtins", "dict") == ("builtins", "dict")
