import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client';

/** The signed-in user and session, or null when signed out (GET /api/auth/get-session). */
export function useSession() {
  return useQuery({
    queryKey: ['session'],
    staleTime: 60_000,
    queryFn: () => unwrap(api.GET('/api/auth/get-session', {})),
  });
}
