import { Title } from '@mantine/core';

export default function Area() {
  return <Title order={1}>audit</Title>;
}
