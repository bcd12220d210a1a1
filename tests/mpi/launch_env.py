"""Each rank's environment in its launcher's words, for the job checkers:
Open MPI's mpirun takes `-x NAME=VALUE`, the MPICH family's Hydra
`-genv NAME VALUE` (tests/mpi/launch.cmake says the same for CMake)."""

FAMILIES = ["openmpi", "mpich"]


def exports(mpi, settings):
    words = []
    for name, value in settings.items():
        words += ["-genv", name, str(value)] if mpi == "mpich" else ["-x", f"{name}={value}"]
    return words
