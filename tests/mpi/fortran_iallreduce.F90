! MPI_IALLREDUCE from Fortran reaches SlimReduce's queue: 10 REAL SUM calls of
! 65536 values (compressible), out of place and with MPI_IN_PLACE, completed by
! MPI_WAITALL, MPI_WAIT and MPI_TEST; inputs are small integers, so the sums
! must be exact, and the library must count all 10 as MPI_Iallreduce calls,
! compressed. Linked against libslimreduce.so (for its counters). Built twice:
! with `use mpi`, and with SLIMREDUCE_F08 defined, with `use mpi_f08`.
program fortran_iallreduce
#ifdef SLIMREDUCE_F08
  use mpi_f08
#else
  use mpi
#endif
  use, intrinsic :: iso_c_binding, only: c_int, c_char, c_double, c_null_char
  implicit none
  interface
    integer(c_int) function slimreduce_get_counter(key, value) bind(C, name='slimreduce_get_counter')
      import :: c_int, c_char, c_double
      character(kind=c_char), dimension(*), intent(in) :: key
      real(c_double), intent(out) :: value
    end function
  end interface
  integer, parameter :: n = 65536, calls = 10
  real :: sends(n, calls), sums(n, calls), expected
#ifdef SLIMREDUCE_F08
  type(MPI_Request) :: requests(calls)
#else
  integer :: requests(calls)
#endif
  integer :: rank, nranks, ierr, t, i, r, wrong
  logical :: done
  real(c_double) :: iallreduce_before, compressed_before, iallreduce_after, compressed_after
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  wrong = 0
  ierr = slimreduce_get_counter('calls.iallreduce' // c_null_char, iallreduce_before)
  ierr = slimreduce_get_counter('calls.compressed' // c_null_char, compressed_before)
  do t = 1, calls
    do i = 1, n
      sends(i, t) = real(mod(i + rank + t, 8))
    end do
    if (mod(t, 2) == 0) then
      sums(:, t) = sends(:, t)
      call MPI_Iallreduce(MPI_IN_PLACE, sums(:, t), n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &
                          requests(t), ierr)
    else
      call MPI_Iallreduce(sends(:, t), sums(:, t), n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &
                          requests(t), ierr)
    end if
    if (ierr /= MPI_SUCCESS) wrong = wrong + 1
  end do
  call MPI_Waitall(6, requests(1:6), MPI_STATUSES_IGNORE, ierr)
  call MPI_Wait(requests(7), MPI_STATUS_IGNORE, ierr)
  call MPI_Wait(requests(8), MPI_STATUS_IGNORE, ierr)
  do t = 9, calls
    done = .false.
    do while (.not. done)
      call MPI_Test(requests(t), done, MPI_STATUS_IGNORE, ierr)
    end do
  end do
  do t = 1, calls
    do i = 1, n
      expected = 0.0
      do r = 0, nranks - 1
        expected = expected + real(mod(i + r + t, 8))
      end do
      if (sums(i, t) /= expected) wrong = wrong + 1
    end do
  end do
  ierr = slimreduce_get_counter('calls.iallreduce' // c_null_char, iallreduce_after)
  ierr = slimreduce_get_counter('calls.compressed' // c_null_char, compressed_after)
  if (iallreduce_after - iallreduce_before /= calls) wrong = wrong + 1
  if (compressed_after - compressed_before /= calls) wrong = wrong + 1
  if (wrong /= 0) print *, 'rank', rank, ':', wrong, 'wrong values or counts'
  call MPI_Finalize(ierr)
  if (wrong /= 0) stop 1
end program fortran_iallreduce
