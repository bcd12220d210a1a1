! A plain Fortran MPI job: 4 REAL SUM allreduces of 65536 values (256 KiB,
! compressible), the last two with MPI_IN_PLACE, and one INTEGER allreduce
! (passed through). Inputs are small integers, exact in 16 bits, so the sums
! must be exact. Built twice: with `use mpi`, and with SLIMREDUCE_F08 defined,
! with `use mpi_f08` (Open MPI's modern binding, which reaches MPI by another
! path than mpif.h and `use mpi`).
program fortran_job
#ifdef SLIMREDUCE_F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer, parameter :: n = 65536
  real :: grads(n), sums(n), expected
  integer :: rank, nranks, ierr, step, i, r, wrong, flag(10), total(10)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  wrong = 0
  do step = 1, 4
    do i = 1, n
      grads(i) = real(mod(i + rank + step, 8))
    end do
    if (step <= 2) then
      call MPI_Allreduce(grads, sums, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    else
      sums = grads
      call MPI_Allreduce(MPI_IN_PLACE, sums, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
    do i = 1, n
      expected = 0.0
      do r = 0, nranks - 1
        expected = expected + real(mod(i + r + step, 8))
      end do
      if (sums(i) /= expected) wrong = wrong + 1
    end do
  end do
  flag = rank
  call MPI_Allreduce(flag, total, 10, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (total(1) /= nranks * (nranks - 1) / 2) wrong = wrong + 1
  if (wrong /= 0) print *, 'rank', rank, ':', wrong, 'wrong values'
  call MPI_Finalize(ierr)
  if (wrong /= 0) stop 1
end program fortran_job
