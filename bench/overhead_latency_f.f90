! overhead_latency_f: overhead_latency.c's loop from Fortran (`use mpi`), whose
! MPI_ALLREDUCE reaches libslimreduce.so through its Fortran entry points
! (mpi_allreduce_), not the C ones. Sizes 8 B to 1 KiB, below any sensible
! SLIMREDUCE_MIN_BYTES: every call passes through. Each size runs NBLOCKS
! blocks of NCALLS calls of MPI_ALLREDUCE, alternating with blocks of
! PMPI_ALLREDUCE (never intercepted); printed per size, max over ranks: the
! median block time of each, in microseconds, and the median ratio of
! neighbouring blocks.
!
!   overhead_latency_f [NBLOCKS [NCALLS]]     (defaults 400 and 50)
program overhead_latency_f
  use mpi
  implicit none
  integer :: ierr, rank, ranks, nblocks, ncalls, count, b
  character(len=32) :: arg
  double precision, allocatable :: mpi_t(:), pmpi_t(:), ratio(:)
  double precision :: mine(3), slowest(3)
  real :: buf(256)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, ranks, ierr)
  nblocks = 400
  ncalls = 50
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) nblocks
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) ncalls
  end if
  allocate (mpi_t(nblocks), pmpi_t(nblocks), ratio(nblocks))
  buf = 0.0
  if (rank == 0) then
    print '(a,i0,a)', '# overhead_latency_f: MPI_ALLREDUCE(MPI_IN_PLACE, MPI_REAL, MPI_SUM) from Fortran, ', &
      ranks, ' ranks'
    print '(a,i0,a,i0,a)', '# median over ', nblocks, ' blocks of ', ncalls, &
      ' calls, max over ranks; pmpi_us: the same through PMPI_ALLREDUCE'
    print '(a)', '# bytes latency_us pmpi_us paired_ratio'
  end if
  count = 2
  do while (count <= 256)
    mine(1) = block_time(.true., count)  ! warm-up
    do b = 1, nblocks
      if (mod(b, 2) == 0) then
        pmpi_t(b) = block_time(.false., count)
        mpi_t(b) = block_time(.true., count)
      else
        mpi_t(b) = block_time(.true., count)
        pmpi_t(b) = block_time(.false., count)
      end if
      ratio(b) = mpi_t(b) / pmpi_t(b)
    end do
    mine = [median(mpi_t), median(pmpi_t), median(ratio)]
    call MPI_REDUCE(mine, slowest, 3, MPI_DOUBLE_PRECISION, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
    if (rank == 0) print '(i0,1x,f8.3,1x,f8.3,1x,f7.4)', 4 * count, slowest(1) * 1d6, &
      slowest(2) * 1d6, slowest(3)
    count = count * 2
  end do
  call MPI_FINALIZE(ierr)

contains

  ! The time of one call, averaged over a block of ncalls.
  double precision function block_time(intercepted, n)
    logical, intent(in) :: intercepted
    integer, intent(in) :: n
    integer :: i, err
    double precision :: start
    call MPI_BARRIER(MPI_COMM_WORLD, err)
    start = MPI_WTIME()
    do i = 1, ncalls
      if (intercepted) then
        call MPI_ALLREDUCE(MPI_IN_PLACE, buf, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, err)
      else
        call PMPI_ALLREDUCE(MPI_IN_PLACE, buf, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, err)
      end if
    end do
    block_time = (MPI_WTIME() - start) / ncalls
  end function block_time

  double precision function median(values)
    double precision, intent(in) :: values(:)
    double precision :: sorted(size(values)), key
    integer :: i, j
    sorted = values
    do i = 2, size(sorted)  ! insertion sort: a few hundred values
      key = sorted(i)
      j = i - 1
      do while (j >= 1)
        if (sorted(j) <= key) exit
        sorted(j + 1) = sorted(j)
        j = j - 1
      end do
      sorted(j + 1) = key
    end do
    j = size(sorted)
    if (mod(j, 2) == 1) then
      median = sorted(j / 2 + 1)
    else
      median = (sorted(j / 2) + sorted(j / 2 + 1)) / 2
    end if
  end function median

end program overhead_latency_f
